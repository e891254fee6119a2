# The sinusoidal positional encoding, one sin/cos pair of dimensions per
# panel, over the first 64 positions: the wavelength 2 pi / w_i grows by the
# factor 10000^(2/48) = 1.47 from one pair to the next.
#
# Data: positional_curves.dat, written by `build/05_encoder --plot-data DIR`:
# the position, then dimensions 0, 1, 2, 3, 8, 9, 24, 25 (d_model 48).
# `make plots` runs this in that folder, setting `terminal` and `output`.
if (!exists("terminal")) terminal = "pngcairo"
if (!exists("output")) output = "positional_curves.png"
set terminal @terminal size 1100,700
set output output

# w_i = 10000^(-2i/48); the wavelength in positions is 2 pi / w_i.
wavelength(i) = 2 * pi * 10000 ** (2.0 * i / 48)
panel(i) = sprintf("i = %d: dimensions %d and %d, wavelength %.1f positions", \
                   i, 2 * i, 2 * i + 1, wavelength(i))

set multiplot layout 2,2 \
    title "Sinusoidal positional encoding, d\\_model = 48: one sin/cos pair per panel"
set xrange [0:63]
set yrange [-1.2:1.2]
set xtics 0,8
set ytics -1,0.5,1
set grid
set xlabel "position"
set ylabel "PE"
set key outside right center vertical

set title panel(0)
plot "positional_curves.dat" using 1:2 w lp pt 7 ps 0.5 lc rgb "#b2182b" title "0 (sin)", \
     "" using 1:3 w lp pt 7 ps 0.5 lc rgb "#2166ac" title "1 (cos)"
set title panel(1)
plot "positional_curves.dat" using 1:4 w lp pt 7 ps 0.5 lc rgb "#b2182b" title "2 (sin)", \
     "" using 1:5 w lp pt 7 ps 0.5 lc rgb "#2166ac" title "3 (cos)"
set title panel(4)
plot "positional_curves.dat" using 1:6 w lp pt 7 ps 0.5 lc rgb "#b2182b" title "8 (sin)", \
     "" using 1:7 w lp pt 7 ps 0.5 lc rgb "#2166ac" title "9 (cos)"
set title panel(12)
plot "positional_curves.dat" using 1:8 w lp pt 7 ps 0.5 lc rgb "#b2182b" title "24 (sin)", \
     "" using 1:9 w lp pt 7 ps 0.5 lc rgb "#2166ac" title "25 (cos)"
unset multiplot
