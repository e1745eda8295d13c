"""What a result is turned into: diagnostics (R-hat, ESS, MCSE), PSIS,
summary tables, predictive simulation, ArviZ export and plots."""
