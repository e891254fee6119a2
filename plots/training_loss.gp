# Training and validation loss of the reverse-task demo, on a log scale,
# with the validation token accuracy on the right-hand axis.
#
# Data: written by `build/08_training --demo` into build/plots:
#   train_log.csv   step,epoch,lr,loss,tokens_per_s      one row per optimizer step
#   val_log.csv     step,epoch,train_loss,val_loss,val_acc   one row per epoch
# `make demo` renders it; by hand: cd build/plots && gnuplot ../../plots/training_loss.gp
# needs: train_log.csv val_log.csv
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
set y2range [0:100]
set y2tics 0,20,100
set ytics nomirror
set grid xtics ytics
plot "train_log.csv" using 1:4 with lines lw 1 lc rgb "#9ecae1" title "training loss (batch)", \
     "val_log.csv" using 1:4 with linespoints lw 2 pt 7 ps 0.8 lc rgb "#de2d26" title "validation loss", \
     "val_log.csv" using 1:($5 * 100) axes x1y2 with linespoints lw 2 pt 5 ps 0.8 lc rgb "#31a354" title "validation accuracy"
