"""Analyses of stored history: backtest and false alarms, regimes, rebaselined limits, imports, reports."""
