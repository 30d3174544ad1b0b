"""Collectors: read what is installed on this host. Standard library only."""
