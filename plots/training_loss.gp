# Training and validation loss of the reverse-task demo, on a log scale,
# with the validation token accuracy on the right-hand axis.
#
# Data: train_log.csv, the loss log `build/08_training --demo` writes into
# build/plots: step,epoch,lr,train_loss,val_loss,val_accuracy,seconds, one row per
# optimizer step; the validation columns are filled at the end of each epoch
# and empty otherwise (gnuplot skips empty fields).
# `make demo` renders it; by hand: cd build/plots && gnuplot ../../plots/training_loss.gp
# needs: train_log.csv
if (!exists("terminal")) terminal = "pngcairo"
if (!exists("output")) output = "training_loss.png"
set terminal @terminal size 900,500
set output output

set datafile separator ","
set key autotitle columnhead right center
set title "Reverse task: cross-entropy loss per step (training) and per epoch (validation)"
set xlabel "optimizer step"
set ylabel "cross-entropy loss (nats)"
set logscale y
set format y "%g"
set y2label "validation token accuracy (%)"
set y2range [0:1]                # the log holds a fraction; the tics read as percent
set y2tics ("0" 0, "20" 0.2, "40" 0.4, "60" 0.6, "80" 0.8, "100" 1)
set ytics nomirror
set grid xtics ytics
set datafile missing ""
plot "train_log.csv" using 1:4 with lines lw 1 lc rgb "#9ecae1" title "training loss (batch)", \
     "" using 1:5 with linespoints lw 2 pt 7 ps 0.8 lc rgb "#de2d26" title "validation loss", \
     "" using 1:6 axes x1y2 with linespoints lw 2 pt 5 ps 0.8 lc rgb "#31a354" \
        title "validation accuracy"
