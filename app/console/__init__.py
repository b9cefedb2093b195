"""The Strata console: `/console`, web pages to watch and steer sessions, tasks, memory,
jobs, pieces and webhooks, served by the same process as the API.

The console is a client of the public API and nothing else. Its pages are rendered on
the server from what the API answers to the signed-in user's key, asked in process
(`app.console.api`: an ASGI request into this same application, through its middleware,
routing, validation and authentication); its live parts read the API's event streams the
same way and turn their events into HTML for the page (`app.console.live`). It imports
no service, repository or worker module (a test checks), so it can show and do only what
an SDK user with that key can.

Why on the server rather than pages that call the API from the browser: the key stays
in an HttpOnly cookie no script can read, so the browser never holds it, and the public
API never has to take a cookie as a credential (every one of its routes would then need
CSRF protection); the pages work without a build step, with htmx for the parts that
change in place. What the console needed and the API lacked (a title search and status
filter for sessions, a timeline of turns, a job's subtasks, the list of tools) was added
to the public API.
"""
