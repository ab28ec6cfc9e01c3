# Types for the parts of kazoo that remediate and its tests use, written from kazoo 2.11's
# source (kazoo ships none). Add what a new call needs, from the same source.
