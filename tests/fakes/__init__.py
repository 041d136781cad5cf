"""Fakes of mm2py's own interfaces shared by the unit tests (never a fake broker: the
integration tests run real ones)."""
