# The sinusoidal positional encoding as a heatmap: position along x, the
# dimension of the encoding along y (dimension 0 at the top), the value as
# colour, red for -1, white for 0, grey to black for +1.
#
# Data: positional_encoding.dat, written by `build/05_encoder --plot-data DIR`
# as "position dimension value" lines, one block per position (d_model 48,
# positions 0..95). `make plots` runs this in that folder, setting `terminal`
# and `output`; by hand: cd build/plots && gnuplot ../../plots/positional_encoding.gp
if (!exists("terminal")) terminal = "pngcairo"
if (!exists("output")) output = "positional_encoding.png"
set terminal @terminal size 1000,420
set output output

set title "Sinusoidal positional encoding, d\\_model = 48\n" . \
          "PE(pos, 2i) = sin(pos w_i),   PE(pos, 2i+1) = cos(pos w_i),   w_i = 10000^{-2i/48}"
set xlabel "position in the sequence"
set ylabel "dimension"
set xrange [-0.5:95.5]
set yrange [47.5:-0.5]           # dimension 0 on top
set xtics 0,10
set ytics 0,8
set cbrange [-1:1]
set cbtics -1,0.5,1
set palette defined (-1 "#67001f", -0.5 "#d6604d", 0 "#ffffff", 0.5 "#878787", 1 "#1a1a1a")
set tics out
unset key
plot "positional_encoding.dat" using 1:2:3 with image
