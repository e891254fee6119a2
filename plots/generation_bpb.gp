# How the shipped language model (models/imdb_lm.safetensors) learned:
# bits per byte against the minutes of training on two CPU cores, the
# training batches' (thin) and the validation reviews' (points), with the
# standard compressors on the test reviews as horizontal lines.
#
# Data: imdb_lm_train_log.csv (step,epoch,lr,train_loss,val_loss,
# val_accuracy,seconds; losses in nats), the training run's log kept in
# models/ and copied into build/plots by `build/12_generation --plot-data
# build/plots`; generation_compressors.dat (name,bits per byte), written by
# `python -m reference.ch12_generation compressors`.
# needs: imdb_lm_train_log.csv generation_compressors.dat
if (!exists("terminal")) terminal = "pngcairo"
if (!exists("output")) output = "generation_bpb.png"
set terminal @terminal size 900,500
set output output

set datafile separator ","
set datafile missing ""
set datafile commentschars "#"
set title "Chapter 12: a byte-level Transformer learns IMDb reviews (C, 2 CPU cores)"
set xlabel "minutes of training"
set ylabel "bits per byte"
set grid xtics ytics
set key top right
bits(nats) = nats / log(2)
stats "imdb_lm_train_log.csv" using ($7 / 60) nooutput
end = STATS_max
set yrange [1.4:4.5]
set xrange [0:end]
plot "imdb_lm_train_log.csv" using ($7 / 60):(bits($4)) every 10 with lines lw 1 \
         lc rgb "#9ecae1" title "training batches", \
     "" using ($7 / 60):(bits($5)) with linespoints lw 2 pt 7 ps 0.8 lc rgb "#de2d26" \
         title "validation reviews", \
     "generation_compressors.dat" using (0):2:(end):(0) with vectors nohead dt 2 lw 1.5 \
         lc rgb "#636363" notitle, \
     "" using (end * (0.6 + 0.2 * $0)):2:1 with labels right offset 0,0.7 notitle
