"""feedbench's LeRobot driver (feedbench measuring LeRobot in the user's Python): see
__main__.py for what each module holds. Not the wheel's `feedbench` package (LeRobot on
feedbench's reader)."""
