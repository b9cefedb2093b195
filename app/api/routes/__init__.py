"""One router per resource, collected by `app.api.router`."""
