"""Development tools of replication_admin (not shipped with the product)."""
