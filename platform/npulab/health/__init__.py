"""Host and device health: the rules, the states, draining, and who changed what."""
