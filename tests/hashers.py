"""A password hasher for the tests' users: PBKDF2 with 1,000 iterations, not 1.5 million."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FastPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Django's PBKDF2 at 1,000 iterations (1.5 million cost ~1 s a user on the CI machine).

    Its hashes are ordinary ``pbkdf2_sha256`` ones with their iteration count inside, so
    every process verifies them with Django's own hasher: a live daphne too, whose settings
    the tests do not touch (it re-hashes at full strength on a user's first sign-in).
    """

    iterations = 1_000
