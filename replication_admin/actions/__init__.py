"""do_* actions: every change of state, in one transaction, shared by views, commands and the scheduler."""
