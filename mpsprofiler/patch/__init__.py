"""``mpsprof patch``: a finding's fix written into the user's own code as a unified diff,
proven on a scratch copy (``--prove``) and applied only when asked (``--apply``)."""
