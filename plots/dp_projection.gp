# Data-parallel training on N machines, projected (chapter 08's README,
# "Data parallelism"): the speed-up over one machine of three models, with
# the gradient all-reduced over a ring on 10 and 100 Gb/s links, against
# the ideal N. Where a curve leaves the diagonal, the all-reduce takes as long
# as the shrinking share of compute.
#
# Data: dp_projection.dat, committed in plots/ (tools/dp-projection.py writes
# it from the measured Taylor step): columns 2-7 the speed-ups of Taylor,
# the IMDb classifier and the base model, each on 10 then 100 Gb/s.
# needs: dp_projection.dat
if (!exists("terminal")) terminal = "pngcairo"
if (!exists("output")) output = "dp_projection.png"
set terminal @terminal size 900,520
set output output

set title "Data parallelism, projected: speed-up on N machines (ring all-reduce, no overlap)"
set xlabel "machines N"
set ylabel "speed-up over one machine"
set logscale xy 2
set xrange [1:64]
set yrange [1:64]
set grid
set key top left
plot x title "ideal" with lines dt 2 lc rgb "#999999", \
     "dp_projection.dat" using 1:2 title "Taylor, 10 Gb/s" with lines lw 2 lc rgb "#3182bd", \
     "" using 1:3 title "Taylor, 100 Gb/s" with lines lw 2 dt 3 lc rgb "#3182bd", \
     "" using 1:4 title "IMDb d 256 x 6, 10 Gb/s" with lines lw 2 lc rgb "#e6550d", \
     "" using 1:5 title "IMDb d 256 x 6, 100 Gb/s" with lines lw 2 dt 3 lc rgb "#e6550d", \
     "" using 1:6 title "base model, 10 Gb/s" with lines lw 2 lc rgb "#31a354", \
     "" using 1:7 title "base model, 100 Gb/s" with lines lw 2 dt 3 lc rgb "#31a354"
