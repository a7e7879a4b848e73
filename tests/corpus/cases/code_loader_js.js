require('child_process').exec('id');
