"""Reference solutions of the assignments, computed the way the course texts compute them."""
