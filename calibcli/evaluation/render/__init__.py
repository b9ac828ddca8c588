"""What an evaluation looks like: terminal tables, the HTML report, plots."""
