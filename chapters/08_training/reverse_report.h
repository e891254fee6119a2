/*
 * reverse_report.h - how the chapter program reports a model of the
 * reverse (or copy) task on its held-out sequences: the loss and token
 * accuracy, for an encoder-decoder the share of sequences greedy decoding
 * gets exactly right, and a few examples side by side; for the labeller
 * also the attention map of the first example, for make plots.
 */
#ifndef REVERSE_REPORT_H
#define REVERSE_REPORT_H

#include "data.h"
#include "error.h"
#include "model.h"

/* Prints the report of m on test (evaluated in batches of batch_size);
 * *accuracy receives the token accuracy (a fraction). With plot_dir, the
 * labeller's attention map goes to plot_dir/attention_map.dat. */
int reverse_report(Model *m, const SeqDataset *test, int batch_size, const char *plot_dir,
                   double *accuracy, Error *err);

#endif
