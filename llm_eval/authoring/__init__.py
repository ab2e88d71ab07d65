"""Side feature: growing the gold set. What each gated scope needs (the plan),
neighbours and coverage of the corpus, drafting questions, and their renderings."""
