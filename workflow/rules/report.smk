# Tables, figures and the self-contained HTML report (filled in by the analysis work).
