import os
import sys

# check_database.py and tuning_child.py live next to the tests (the kill campaign in
# benchmarks/ uses them too).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
