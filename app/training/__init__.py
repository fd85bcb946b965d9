"""Training: the /train request, the algorithm table, the fit pipeline and the job runner."""
