"""Before a run: what a sweep will show (the power plan) and what it will cost (requests, tokens, money, time)."""
