"""HTTP edge: routers parse, call a service, return. `HTTPException` lives only here."""
