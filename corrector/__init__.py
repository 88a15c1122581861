"""Chinese spelling correction with an ELECTRA discriminator, generator and scorer."""

__version__ = "0.1.0"
