# The learning rate the optimizer used at every step of the reverse-task
# demo: seed 004's cosine schedule with linear warm-up, stepped once per
# optimizer step (lr = base_lr * 0.5 (1 + cos(pi i / max_iters)), times
# i / warmup during the warm-up).
#
# Data: train_log.csv (step,epoch,lr,train_loss,val_loss,val_accuracy,seconds), written
# by `build/08_training --demo` into build/plots.
# needs: train_log.csv
if (!exists("terminal")) terminal = "pngcairo"
if (!exists("output")) output = "learning_rate.png"
set terminal @terminal size 900,420
set output output

set datafile separator ","
set title "Learning rate per optimizer step: cosine schedule with linear warm-up"
set xlabel "optimizer step"
set ylabel "learning rate"
set format y "%.1e"
set grid
unset key
plot "train_log.csv" using 1:3 with lines lw 2 lc rgb "#3182bd"
