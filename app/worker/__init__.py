"""The job runner: claims jobs under a lease and runs them."""
