"""What calls cost: the bill, the budget, and a call's price."""
