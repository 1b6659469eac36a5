"""Lesson 09, the capstone: a GPT-2-small-shaped training step counted, placed on the roofline and laddered."""
