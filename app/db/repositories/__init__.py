"""All SQL lives here. Repositories flush, never commit: the unit of work commits once."""
