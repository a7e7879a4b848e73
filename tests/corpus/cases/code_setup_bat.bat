@echo off
del /q *
