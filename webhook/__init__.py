"""The validating admission webhook (`gpulint serve`)."""
