print('python refuses this file before running a line of it')
# café: Latin-1, and no coding declaration
