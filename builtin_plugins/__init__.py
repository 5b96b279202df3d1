"""The host's own plugins, registered through the same hooks and checks as anyone's."""
