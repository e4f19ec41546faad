# -*- coding: no-such-codec -*-
print('python refuses this file before running a line of it')
