"""The console's screens: main (everything at once), help, alerts, preflight results."""
