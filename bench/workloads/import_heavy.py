"""Import-heavy start-up: a script that imports a broad set of the standard library.

What a data or automation script pulls in before its first line of work. Prints one line
with how many of these modules it imported.
"""

import argparse
import asyncio
import base64
import bz2
import collections
import concurrent.futures
import configparser
import contextlib
import csv
import dataclasses
import datetime
import decimal
import difflib
import email
import email.message
import email.mime.multipart
import email.mime.text
import email.utils
import enum
import fractions
import functools
import gzip
import hashlib
import heapq
import html.parser
import http.client
import inspect
import ipaddress
import itertools
import json
import logging
import lzma
import pathlib
import pickle
import random
import re
import shutil
import sqlite3
import statistics
import string
import tarfile
import tempfile
import textwrap
import threading
import typing
import unittest
import urllib.parse
import uuid
import xml.dom.minidom
import xml.etree.ElementTree
import zipfile

MODULES = [
    argparse, asyncio, base64, bz2, collections, concurrent.futures, configparser, contextlib,
    csv, dataclasses, datetime, decimal, difflib, email, email.message, email.mime.multipart,
    email.mime.text, email.utils, enum, fractions, functools, gzip, hashlib, heapq, html.parser,
    http.client, inspect, ipaddress, itertools, json, logging, lzma, pathlib, pickle, random, re,
    shutil, sqlite3, statistics, string, tarfile, tempfile, textwrap, threading, typing,
    unittest, urllib.parse, uuid, xml.dom.minidom, xml.etree.ElementTree, zipfile,
]  # fmt: skip

print(f"imported {len(MODULES)} standard library modules")
