# -*- coding: ascii -*-
print('python refuses this file before running a line of it')
# café
