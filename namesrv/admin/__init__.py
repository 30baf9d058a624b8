"""``namesrv-admin``: the name-server verbs of upstream's ``mqadmin``, plus the push extension's."""
