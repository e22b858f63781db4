"""Keep pytest out of the fixture repositories (their tests run only inside the sandbox)."""

collect_ignore = ["fixtures"]
