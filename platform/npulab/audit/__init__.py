"""Who did what: the audit log of actions on runs, hosts, snapshots and tokens."""
