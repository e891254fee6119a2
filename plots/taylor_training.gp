# How the shipped Taylor-series model (models/taylor.safetensors) trained:
# training loss per optimizer step and validation loss per epoch (left, log
# scale), and greedy exact match on the 100 validation pairs every 5 epochs
# (right).
#
# Data: taylor_train_log.csv (step,epoch,lr,train_loss,val_loss,val_accuracy,
# every 20th step and every epoch's end) and taylor_exact.csv
# (step,epoch,val_exact), the logs of the training run, kept in models/ and
# copied into build/plots by `build/09_translation --plot-data build/plots`.
# needs: taylor_train_log.csv taylor_exact.csv
if (!exists("terminal")) terminal = "pngcairo"
if (!exists("output")) output = "taylor_training.png"
set terminal @terminal size 900,500
set output output

set datafile separator ","
set datafile missing ""
set title "Taylor-series task: loss and greedy exact match while training"
set xlabel "optimizer step"
set ylabel "cross-entropy loss (nats)"
set logscale y
set format y "%g"
set y2label "validation exact match"
set y2range [0:1]
set y2tics 0.1
set ytics nomirror
set grid xtics ytics
set key below
plot "taylor_train_log.csv" using 1:4 every ::1 with lines lw 1 lc rgb "#9ecae1" \
         title "training loss (batch)", \
     "" using 1:5 with lines lw 2 lc rgb "#de2d26" title "validation loss", \
     "taylor_exact.csv" using 1:3 axes x1y2 with linespoints lw 2 pt 7 ps 0.6 \
         lc rgb "#31a354" title "validation exact match (greedy)"
