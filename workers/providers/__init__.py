"""Provider adapters: neutral chat requests in, classified HTTP outcomes out (see families.py for the
one table of provider names)."""
