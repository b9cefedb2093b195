"""Request and response models per resource (Create / Update / Public / List)."""
