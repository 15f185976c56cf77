"""The report: figures and the self-contained HTML page, from every earlier stage's outputs.

    answer         the first screen: the answer to what the study asked, for a person deciding
    plots_headline the figure under the answer: measured and predicted steps per placement class
    plotkit        the figures' look: sizes, colours, markers, legends below, intervals inside the frame
    series         what the study figures share: titles, measured curves with CIs, the model's lines
    plots_scaling  strong-scaling speedup and efficiency, loss curves, weak scaling
    plots_costs    exposed communication by placement, the all-reduce sweep, the model-size sweep
    ddp_plot       the ddp experiment: time to target per DDP setting, its loss curves
    plots_accuracy the "Time to accuracy" figures (held-out validation curves)
    plots_anatomy  the "What bounds a step" figures: a step split into dispatch, compute, all-reduce
    anatomy_section the "What bounds a step" section: the anatomy table as cells, figures and words
    plots          plot_figures: every figure and figures.json
    figure_names   the names render looks figures up by, without importing what draws them
    reference      the seed paper's published points and when they may be drawn next to ours
    compare        other studies' results folders (report.compare) and the key figures side by side
    operator       operator speed vs scaling: compute share of a step, the per-rank batch that pays off
    numbers        a guideline's cited numbers as small tables
    run_summary    the box at the top: measured on what (imported: from where), run counts
    cells          the study's tables as rows of text cells
    sections       the other parts of the page: figures inline, fits, model, guidelines, looks, ...
    render         render_report: the page (Jinja2, report/templates/report.html.j2)
"""
