/*
 * set_commands.h - the data of chapter 11's task (sets drawn from the digits,
 * digits.h), its report, and the program's commands besides training and
 * evaluation (task.h has those). argv holds the arguments after the
 * command.
 *
 *     --demo           the shipped model on a few test sets
 *     --plot-data DIR  one test set's digits, scores and attention, for make plots
 */
#ifndef SET_COMMANDS_H
#define SET_COMMANDS_H

#include "digits.h"
#include "error.h"
#include "model.h"

#define SHIPPED_MODEL "models/set_anomaly.safetensors"

typedef struct {
    Digits digits;
    DigitPool train_pool, test_pool;
    DigitSets train, test;
} SetData;

/* Reads and splits the images and draws the sets (training sets only when
 * n_train > 0). */
int set_data_open(SetData *d, const char *path, int n_train, int n_test, Error *err);
void set_data_free(SetData *d);

/* Fails unless m (read from path) is a set model over the digits. */
int set_check_model(const Model *m, const char *path, Error *err);

/* Test accuracy, printed, and where the misses are: by the common digit
 * and by the odd one. */
int set_report(Model *m, const DigitSets *s, double *acc, Error *err);

int set_demo_command(int argc, char **argv, Error *err);
int set_plot_data_command(int argc, char **argv, Error *err);

#endif
