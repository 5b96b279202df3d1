"""The game link: games that can only call out sync with the host, taking the commands
plugins queue and bringing back answers and happenings (``docs/link.md``)."""
