"""All of reconciliation's SQL, one module per concern: ``cases`` (the cases table), and the
data each check gathers."""
